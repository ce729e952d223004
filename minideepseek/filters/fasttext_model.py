"""Loading a fastText classifier and scoring one document: the single path the trainer's held-out
evaluation and the stage-1 ``quality`` filter share, so a score in the model report is the score the
filter sees.

Prediction uses ``fasttext-predict`` (the C++ fastText core, predict-only: the same module that
loads lid.176 for ``langid``), so any standard fastText ``.bin``/``.ftz`` works unchanged: ours, or
a published one such as DCLM's (``__label__hq``/``__label__cc``). Training needs another package
(``fasttext-new``, see :mod:`.train`); its files load here byte-for-byte, which a test checks.

Input preparation follows DCLM's scorer: fastText predicts one line, so newlines become spaces; we
also cut the text to a prefix of ``max_chars`` characters so one huge page cannot dominate the
stage's time (scores of longer documents are the prefix's score; the report says so).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from ..config import ConfigError
from ..fsio import sha256_file

LABEL_PREFIX = "__label__"
DEFAULT_MAX_CHARS = 20_000
_MODELS: dict[tuple[str, int, int], Any] = {}
_LOCK = threading.Lock()


def full_label(label: str) -> str:
    """``hq`` and ``__label__hq`` name the same fastText label."""
    return label if label.startswith(LABEL_PREFIX) else LABEL_PREFIX + label


def prepare(text: str, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """The one line fastText sees (training lines are made by the same function)."""
    return " ".join(text[:max_chars].split())


def load(path: str | Path) -> Any:
    """The model at ``path``, loaded once per process and file version (fasttext-predict)."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as exc:
        raise ConfigError(f"quality model {p} not found ({exc.strerror}); train one with "
                          "`python -m minideepseek.quality train` or point `model:` at a fastText .bin/.ftz") from exc
    key = (str(p.resolve()), st.st_mtime_ns, st.st_size)
    with _LOCK:
        if key not in _MODELS:
            import fasttext  # fasttext-predict

            if hasattr(fasttext, "train_supervised"):
                raise ConfigError("the `fasttext` module comes from a training fastText package; run "
                                  "pip uninstall -y fasttext && pip install --force-reinstall --no-deps fasttext-predict")
            try:
                _MODELS[key] = fasttext.load_model(str(p))
            except Exception as exc:  # noqa: BLE001 - fastText raises ValueError/RuntimeError on a bad file
                raise ConfigError(f"quality model {p} is not a fastText model ({exc}); use a .bin/.ftz "
                                  "saved by fastText") from exc
    return _MODELS[key]


def labels_of(model: Any) -> list[str]:
    """Every label of a supervised model. fasttext-predict has no ``get_labels``; a prediction with
    ``k=-1`` and threshold 0 lists them all (any one-word line gives every label a probability)."""
    labels, _ = model.predict("the", k=-1, threshold=0.0)
    return sorted(labels)


def check_label(model: Any, label: str, path: str | Path) -> str:
    """The full positive label, or a ConfigError listing the model's labels."""
    want = full_label(label)
    have = labels_of(model)
    if want not in have:
        raise ConfigError(f"quality model {path} has no label {want!r}; its labels are {have}: set `label:` to one")
    return want


def score(model: Any, text: str, label: str, max_chars: int = DEFAULT_MAX_CHARS) -> float:
    """Probability of ``label`` (a full ``__label__x``) for ``text``; 0.0 for an empty line."""
    line = prepare(text, max_chars)
    if not line:
        return 0.0
    labels, probs = model.predict(line, k=-1, threshold=0.0)
    for lab, p in zip(labels, probs):
        if lab == label:
            return min(float(p), 1.0)  # fastText's softmax can return 1.00001
    return 0.0


def model_sha256(path: str | Path) -> str:
    return sha256_file(Path(path))
