"""``smoke_train.py`` with the training step compiled by the ``aot_eager`` backend, for the torchrun
test of DDP over a compiled model on CPU: the same graph capture and autograd tracing as inductor,
without its CPU code generation (a minute per rank on two cores)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import smoke_train  # noqa: E402
from minideepseek.train import trainer  # noqa: E402

if __name__ == "__main__":
    trainer.COMPILE_OPTIONS["backend"] = "aot_eager"
    raise SystemExit(smoke_train.main())
