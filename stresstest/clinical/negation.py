"""ConText/NegEx-style assertion status of a clinical mention.

medspacy was evaluated first: its install resolves to numpy 1.26 and spaCy 3.7,
which would downgrade the project's numpy 2.x, so the algorithm is implemented
here with its rule tables as data (``data/context_rules.tsv``,
``data/fillers.tsv``).

Rules, on the shared token stream:

* The scope of a cue is the mention's sentence (split at ``. ! ? ;``, line
  breaks and speaker labels ``D:``/``P:``/``[doctor]``; "39.4" does not
  split), cut at scope terminators ("but", "however", "like I've"...), and at
  most :data:`PRE_WINDOW` tokens before / :data:`POST_WINDOW` tokens after the
  mention, so punctuation-free ASR text does not let a cue reach across a
  whole turn. A cue may declare a longer reach in the table (hypotheticals
  such as "if you ..." reach 16 tokens; a bare "if" is no cue because "if I
  walk a block I get short of breath" describes a real symptom).
* Pseudo-cues ("not only", "no change", "doesn't help") mask the words they
  cover. Among real cues the one closest to the mention wins.
* Dialogue question/answer: when the mention sits in a question ("Any chest
  pain?") the next sentence's first words decide ("No" / "Nope" / "No,
  never" / "Nothing like that" -> absent; "Yes" / "I do" -> present; "Not
  sure" -> uncertain). A negated question confirmed ("No chest pain?"
  "Right.") is absent. A sentence without "?" that opens like a yes/no
  question ("do you have any nausea") and is answered yes/no counts too, and
  in run-on text a question lead followed within :data:`QA_SKIP` words by a
  bare "no"/"yes" is read the same way. An open question without a yes/no
  answer ("When did the cough start?") presupposes its target and is read as
  a statement. Any other unanswered question asserts nothing:
  :func:`mention_status` reports it as ``"uncertain"`` with source
  ``"unanswered"``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from stresstest.clinical.lexicon import Mention
from stresstest.clinical.text import Token, norm_phrase, read_table, tokenize
from stresstest.clinical.vocab import answer_fillers

Status = Literal["present", "absent", "uncertain"]

#: Tokens before the mention a pre-cue may be in (NegEx uses 5-6; dialogue lists run longer).
PRE_WINDOW = 8
#: Tokens after the mention a post-cue may be in.
POST_WINDOW = 4
#: Words of a listed question that may sit between a target and a bare yes/no ("or chills").
QA_SKIP = 8
#: Tokens before a target in which a question opener ("any", "do you have") may sit.
QA_LEAD_WINDOW = 12
_CLAUSE_START = frozenset(
    {
        "i",
        "i'm",
        "i've",
        "i'd",
        "you",
        "you're",
        "he",
        "she",
        "we",
        "they",
        "it",
        "it's",
        "my",
        "your",
        "what",
        "when",
        "how",
        "where",
        "why",
    }
)
_SENT_PUNCT = frozenset(".!?;\n")
_ANSWER_KINDS = ("answer_no", "answer_unsure", "confirm", "answer_yes")
_WH_WORDS = frozenset({"when", "how", "what", "where", "which", "why", "what's", "where's", "how's"})
_OPENERS = frozenset({"and", "but", "now", "alright", "all", "right", "great", "good", "yeah", "yes", "okay"})
#: A whole reply that is only one of these ("No.", "Nope.", "Yeah.") answers the sentence before it.
_BARE_REPLIES = frozenset({"no", "nope", "nah", "never", "yes", "yeah", "yep", "yup"})
_ACKNOWLEDGE = frozenset({"ok", "okay", "alright", "right", "sure", "great", "good", "thanks", "gotcha"})
#: The speaker talking about themself (shared with the rules structurer).
FIRST_PERSON = frozenset({"i", "i'm", "i've", "i'd", "i'll", "me", "my", "mine", "we", "we're", "our", "us"})
_BRACKET_LABELS = frozenset({"doctor", "patient", "speaker", "clinician", "nurse"})  # "[doctor]" (ACI-BENCH)
_SPEAKER_LABELS = frozenset({"D", "P", "Doctor", "Patient", "DOCTOR", "PATIENT"})


@dataclass(frozen=True, slots=True)
class Assertion:
    """Status of one mention and what decided it.

    Attributes:
        status: present / absent / uncertain.
        source: "statement" (cue or no cue in the mention's own sentence),
            "answer" (decided by the answer to a question), or
            "unanswered" (a question with no readable yes/no answer).
        cue: The cue or answer text that decided it (None for a bare statement).
        cue_start: Character offset of that cue (None when there is none).
        cue_end: End offset of that cue.
    """

    status: Status
    source: Literal["statement", "answer", "unanswered"]
    cue: str | None = None
    cue_start: int | None = None
    cue_end: int | None = None


class _Rules:
    def __init__(self) -> None:
        self.by_type: dict[str, dict[tuple[str, ...], str]] = {}
        self.reach: dict[tuple[str, ...], int] = {}
        for row in read_table("context_rules.tsv"):
            if len(row) < 3:
                continue
            phrase, kind, direction = row[0], row[1], row[2]
            key = tuple(norm_phrase(phrase).split())
            self.by_type.setdefault(kind, {})[key] = direction
            if len(row) >= 4 and row[3]:
                # Optional 4th column: how many tokens before its target a pre-cue reaches.
                self.reach[key] = int(row[3])
        self.fillers = answer_fillers()
        self.max_len = max(len(k) for table in self.by_type.values() for k in table)
        self.max_reach = max([PRE_WINDOW, *self.reach.values()])

    def match_at(
        self, words: Sequence[str], i: int, kinds: tuple[str, ...], direction: str, limit: int
    ) -> tuple[str, int]:
        """Longest cue of one of ``kinds`` in ``words[i:limit]`` starting at i: (kind, length) or ("", 0)."""
        for n in range(min(self.max_len, limit - i), 0, -1):
            key = tuple(words[i : i + n])
            for kind in kinds:
                d = self.by_type.get(kind, {}).get(key)
                if d is not None and (d == "both" or d == direction):
                    return kind, n
        return "", 0


@functools.lru_cache(maxsize=1)
def _rules() -> _Rules:
    return _Rules()


class ContextAnalyzer:
    """Assertion status for many mentions of one text (tokenises once).

    Args:
        text: The text the mentions' offsets point into.
        tokens: Its tokens, if already computed with :func:`tokenize`.

    Attributes (read-only, shared with the rules structurer):
        tokens / words: the tokens and their lookup forms.
        sent_id: sentence number of each token; sent_start: first token of each sentence.
        ends_q: whether each sentence ends with "?".
        skip: token indices that are speaker labels ("D:", "[doctor]").
        starts: start offset of each token (for bisecting character offsets).
    """

    def __init__(self, text: str, tokens: list[Token] | None = None) -> None:
        self.text = text
        self.tokens = tokens if tokens is not None else tokenize(text)
        self.words = [t.norm for t in self.tokens]
        # sent_id[k]: sentence number of token k; ends_q[s]: sentence s ends with "?".
        self.sent_id: list[int] = []
        self.ends_q: list[bool] = []
        self.sent_start: list[int] = []
        sid = 0
        # Speaker labels ("D:", "P:") open a new sentence and are not words of it.
        skip = {
            k
            for k, tok in enumerate(self.tokens)
            if (tok.text in _SPEAKER_LABELS and text.startswith(":", tok.end))
            or (
                tok.norm in _BRACKET_LABELS and text.startswith("]", tok.end) and text[tok.start - 1 : tok.start] == "["
            )
        }
        for k, tok in enumerate(self.tokens):
            nxt = self.tokens[k + 1].start if k + 1 < len(self.tokens) else len(text)
            gap = text[tok.end : nxt]
            if k == 0 or k in skip or self._splits(k):
                if k > 0:
                    sid += 1
                self.sent_start.append(k)
                self.ends_q.append(False)
            self.sent_id.append(sid)
            if "?" in gap:
                self.ends_q[sid] = True
        self.skip = skip
        self.starts = [t.start for t in self.tokens]

    @staticmethod
    def _boundary(gap: str) -> bool:
        return any(ch in _SENT_PUNCT for ch in gap)

    def _splits(self, k: int) -> bool:
        """Whether a sentence boundary lies between tokens k-1 and k ("39.4" and "3.5" do not split)."""
        prev, tok = self.tokens[k - 1], self.tokens[k]
        gap = self.text[prev.end : tok.start]
        if gap in (".", ",") and prev.text[-1].isdigit() and tok.text[0].isdigit():
            return False
        return self._boundary(gap)

    def _span(self, mention: Mention) -> tuple[int, int]:
        """Token index range [i, j) covered by the mention."""
        import bisect

        i = bisect.bisect_right(self.starts, mention.start) - 1
        i = max(i, 0)
        while i < len(self.tokens) and self.tokens[i].end <= mention.start:
            i += 1
        j = i
        while j < len(self.tokens) and self.tokens[j].start < mention.end:
            j += 1
        return i, max(j, i + 1)

    def _sentence(self, s: int) -> tuple[int, int]:
        lo = self.sent_start[s]
        hi = self.sent_start[s + 1] if s + 1 < len(self.sent_start) else len(self.tokens)
        return lo, hi

    def _cue(self, lo: int, hi: int, direction: str, near_end: bool) -> tuple[str, int, int] | None:
        """Closest negated/uncertain cue in tokens [lo, hi); pseudo-cues masked, terminators cut scope."""
        r = _rules()
        words = self.words
        found: list[tuple[str, int, int]] = []
        k = lo
        while k < hi:
            kind, n = r.match_at(words, k, ("pseudo", "terminate", "uncertain", "negated"), direction, hi)
            if kind == "terminate":
                if near_end:
                    found.clear()  # only cues after the terminator reach a following target
                else:
                    break  # nothing after the terminator reaches back
            elif kind in ("negated", "uncertain"):
                # A pre-cue reaches PRE_WINDOW tokens unless the table gives it more ("if ...").
                reach = r.reach.get(tuple(words[k : k + n]), PRE_WINDOW)
                if not near_end or hi - (k + n) < reach:
                    found.append((kind, k, k + n))
            k += max(n, 1)
        if not found:
            return None
        return found[-1] if near_end else found[0]

    def _answer(self, k: int, limit: int) -> tuple[str, int, int] | None:
        """Read a yes/no answer starting at token k (fillers skipped)."""
        r = _rules()
        limit = min(limit, len(self.words))
        while k < limit:
            if k in self.skip:
                k += 1
                continue
            kind, n = r.match_at(self.words, k, _ANSWER_KINDS, "post", limit)
            if kind:
                return kind, k, k + n
            if self.words[k] in r.fillers:
                k += 1
                continue
            return None
        return None

    def _bare_answer(self, j: int, hi: int) -> tuple[str, int, int] | None:
        """A yes/no right after a question's target in unpunctuated text.

        Skips the rest of a listed question ("or chills", "at all", "recently") for at most
        :data:`QA_SKIP` words and gives up when a new clause starts (a pronoun), so that a
        later "no" is not taken as the answer to this question.
        """
        r = _rules()
        k = j
        limit = min(hi, j + QA_SKIP + 1)
        while k < limit:
            kind, n = r.match_at(self.words, k, ("answer_no", "answer_yes"), "post", min(hi, k + 2))
            if kind:
                return kind, k, k + n
            if self.words[k] in _CLAUSE_START:
                return None
            k += 1
        return None

    def _bare_reply_follows(self, s: int, lo: int, hi: int) -> bool:
        """Sentence ``s`` is a question the transcriber closed with a full stop ("Fevers or chills." - "No."):
        the next sentence is nothing but a yes/no word, and ``s`` is not the speaker talking about themself."""
        if s + 1 >= len(self.sent_start) or any(self.words[k] in FIRST_PERSON for k in range(lo, hi)):
            return False
        fillers = _rules().fillers
        own = [self.words[k] for k in range(lo, hi) if k not in self.skip and self.words[k] not in fillers]
        if not own or own[0] in _BARE_REPLIES or own[0] in ("nothing", "not", "none"):
            return False  # "Nothing like this before." - "No, OK.": an answer, echoed
        a_lo, a_hi = self._sentence(s + 1)
        reply = [self.words[k] for k in range(a_lo, a_hi) if k not in self.skip]
        if any(w in _ACKNOWLEDGE for w in reply):
            return False
        words = [w for w in reply if w not in fillers]
        return bool(words) and len(words) <= 3 and all(w in _BARE_REPLIES for w in words)

    def _wh_question(self, lo: int, hi: int, i: int) -> bool:
        """An open (wh-) question that takes its target for granted ("how long has the cough...").

        Not when it opens like a yes/no question or asks "what/how about X" (a yes/no question too).
        """
        if self._opens_question(lo, i):
            return False
        words = self.words
        for k in range(lo, hi):
            if words[k] in _WH_WORDS:
                return not (k + 1 < hi and words[k + 1] == "about")
        return False

    def _opens_question(self, lo: int, i: int) -> bool:
        """The sentence starts like a yes/no question ("do you have", "any", "have you had")."""
        r = _rules()
        k = lo
        while k < i and (k in self.skip or self.words[k] in r.fillers or self.words[k] in _OPENERS):
            k += 1
        kind, _ = r.match_at(self.words, k, ("question",), "pre", i)
        return bool(kind)

    def _is_question_lead(self, lo: int, i: int) -> bool:
        r = _rules()
        for k in range(max(lo, i - QA_LEAD_WINDOW), i):
            kind, _ = r.match_at(self.words, k, ("question",), "pre", i)
            if kind:
                return True
        return False

    def assertion(self, mention: Mention) -> Assertion:
        """Status of ``mention`` (offsets into this analyzer's text) with its deciding cue."""
        if not self.tokens:
            return Assertion("present", "statement")
        i, j = self._span(mention)
        s = self.sent_id[min(i, len(self.sent_id) - 1)]
        lo, hi = self._sentence(s)
        pre = self._cue(max(lo, i - _rules().max_reach), i, "pre", near_end=True)
        ans = None
        asked = self.ends_q[s] or self._bare_reply_follows(s, lo, hi)
        if s + 1 < len(self.sent_start) and (asked or self._opens_question(lo, i)):
            a_lo, a_hi = self._sentence(s + 1)
            ans = self._answer(a_lo, a_hi)
        presupposed = ans is None and self.ends_q[s] and self._wh_question(lo, hi, i)
        if (asked or ans is not None) and not presupposed:
            # A question: marked by "?", or (unpunctuated turns) opened like one and answered yes/no.
            # A wh-question without a yes/no answer ("When did the cough start?") presupposes its
            # target and is read as a statement below.
            negated_q = pre is not None and pre[0] == "negated"
            if ans is None:
                return Assertion("uncertain", "unanswered")
            kind, a, b = ans
            status: Status
            if kind == "answer_no":
                status = "absent"
            elif kind == "answer_unsure":
                status = "uncertain"
            elif kind == "confirm" and negated_q:
                status = "absent"
            elif negated_q:
                status = "uncertain"  # "Yes" to "No chest pain?" is genuinely ambiguous
            else:
                status = "present"
            return self._make(status, "answer", a, b)
        if self._is_question_lead(lo, i):
            # Unpunctuated dialogue: "do you have any chest pain no i don't", "any fevers or chills nope".
            ans = self._bare_answer(j, hi)
            if ans is not None:
                kind, a, b = ans
                return self._make("absent" if kind == "answer_no" else "present", "answer", a, b)
        if pre is not None:
            kind, a, b = pre
            return self._make("absent" if kind == "negated" else "uncertain", "statement", a, b)
        post = self._cue(j, min(hi, j + POST_WINDOW), "post", near_end=False)
        if post is not None:
            kind, a, b = post
            return self._make("absent" if kind == "negated" else "uncertain", "statement", a, b)
        return Assertion("present", "statement")

    def _make(self, status: Status, source: Literal["statement", "answer"], a: int, b: int) -> Assertion:
        start, end = self.tokens[a].start, self.tokens[b - 1].end
        return Assertion(status, source, self.text[start:end], start, end)


@functools.lru_cache(maxsize=16)
def _analyzer(text: str) -> ContextAnalyzer:
    return ContextAnalyzer(text)


def mention_status(text: str, mention: Mention) -> Status:
    """Assertion status of a mention: present, absent (negated) or uncertain.

    Args:
        text: The text the mention was found in (its offsets point here).
        mention: From :func:`find_mentions` / :func:`find_drugs`, or any
            Mention with valid offsets.

    Returns:
        "absent" for negated mentions and questions answered "no"; "uncertain"
        for hedged mentions and for questions without a readable answer;
        otherwise "present".
    """
    return _analyzer(text).assertion(mention).status


def mention_assertion(text: str, mention: Mention) -> Assertion:
    """Like :func:`mention_status` but also says which cue or answer decided it."""
    return _analyzer(text).assertion(mention)
