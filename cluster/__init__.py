"""Render workers on Ray (issue 13): `alaya-studio serve --cluster auto|local|ray://HOST:PORT [--workers N]`.

An optional extra (`pip install .[cluster]`): nothing in the default studio imports this package. The studio
front (FastAPI, signalling, page, data channel, encoders) stays one process; each render worker is a Ray actor
holding one GPU (or a CPU slot when the cluster has none) and its renderer, loaded once, hosting up to its
capacity of sessions (batched with `--batch-sessions`). worker.py is the actor, pool.py starts or joins Ray,
places sessions and watches the workers, remote.py is the Renderer the studio's sessions use.
"""
