"""Versioned instruction files of the Draft and Guard roles (package data)."""
