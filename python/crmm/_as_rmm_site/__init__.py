"""The directory `python3 -m crmm.as_rmm` puts first on $PYTHONPATH, so that the processes its
program starts (multiprocessing's spawned workers, subprocesses running Python) import rmm as
crmm too: its sitecustomize.py installs the alias there."""
