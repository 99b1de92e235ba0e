"""The seek loop's bookkeeping, shared by the two batched decoders (openai-whisper in
:mod:`stresstest.asr.backends`, faster-whisper in :mod:`stresstest.asr.fw_batched`).

Both follow their library's sequential ``transcribe`` loop for each window and differ from it only in
scheduling: a queue of (window, seek) decodes is served ``batch_size`` at a time (:func:`seek_batches`), so a
window's next decode shares a batch with other windows' first ones. What a decode's tokens mean (segments,
the next seek, the silence rule) stays with each decoder; the move to the next seek (:meth:`SeekWindow.advance`)
and the cost counts (:meth:`SeekWindow.count_decode`) are the same in both.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar


@dataclass(kw_only=True)
class SeekWindow:
    """One window in a batched seek loop: where its next decode starts, and what its decodes cost."""

    content_frames: int
    seek: int = 0
    decodes: int = 0
    sampled: int = 0
    limit_hits: int = 0
    decode_tokens: list[int] = field(default_factory=list)  # tokens sampled by each decode, in order

    def count_decode(self, n_tokens: int, token_limit: int) -> None:
        """Count one decode of ``n_tokens`` sampled tokens; ``token_limit`` or more is a limit hit."""
        self.decodes += 1
        self.sampled += n_tokens
        self.decode_tokens.append(n_tokens)
        if n_tokens >= token_limit:
            self.limit_hits += 1

    def advance(self, seek: int, segment_size: int) -> None:
        """Move to ``seek``; one that does not move forward (a pair of timestamps at 0.00 s) moves a full
        ``segment_size`` instead: ``transcribe`` would decode the same input again, forever."""
        self.seek = seek if seek > self.seek else self.seek + segment_size


W = TypeVar("W", bound=SeekWindow)


def seek_batches(windows: Sequence[W], batch_size: int, n_frames: int) -> Iterator[list[tuple[W, int]]]:
    """Batches of at most ``batch_size`` (window, frames to decode from its seek, at most ``n_frames``).

    The caller decodes a batch and advances its windows before asking for the next one; a window whose seek
    has not reached its content's end is queued again, behind the windows already waiting. Windows without
    content are never decoded.
    """
    queue = deque(w for w in windows if w.content_frames > 0)
    while queue:
        batch = [queue.popleft() for _ in range(min(batch_size, len(queue)))]
        yield [(w, min(n_frames, w.content_frames - w.seek)) for w in batch]
        queue.extend(w for w in batch if w.seek < w.content_frames)
