"""The batched seek loop's bookkeeping (stresstest.asr.seek), shared by the openai-whisper and faster-whisper paths."""

from __future__ import annotations

from dataclasses import dataclass

from stresstest.asr.seek import SeekWindow, seek_batches


@dataclass
class _Named(SeekWindow):
    name: str = ""


def test_a_seek_that_does_not_move_forward_moves_a_full_segment() -> None:
    w = SeekWindow(content_frames=9000, seek=100)
    w.advance(1600, 3000)
    assert w.seek == 1600
    w.advance(1600, 3000)  # a pair of timestamps at 0.00 s: the same input again, forever
    assert w.seek == 4600
    w.advance(10, 3000)
    assert w.seek == 7600


def test_decodes_tokens_and_limit_hits_are_counted() -> None:
    w = SeekWindow(content_frames=1)
    for n in (3, 224, 225, 0):
        w.count_decode(n, 224)
    assert (w.decodes, w.sampled, w.limit_hits) == (4, 452, 2)


def test_batches_serve_the_queue_in_order_and_requeue_unfinished_windows_behind_it() -> None:
    wins = [_Named(content_frames=c, name=n) for n, c in (("A", 0), ("B", 5), ("C", 12), ("D", 3))]
    seen = []
    for batch in seek_batches(wins, batch_size=2, n_frames=4):
        seen.append([(w.name, w.seek, n) for w, n in batch])
        for w, n in batch:
            w.advance(w.seek + n, n)
    # A has no content; B and C are queued again behind D after their first decode.
    assert seen == [[("B", 0, 4), ("C", 0, 4)], [("D", 0, 3), ("B", 4, 1)], [("C", 4, 4)], [("C", 8, 4)]]
    assert [w.seek for w in wins] == [0, 5, 12, 3]
