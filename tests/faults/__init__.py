"""The fault suite (issue 13): kill, freeze and cut every part, and count what was lost or done
twice — in the spirit of Jepsen's nemesis and checkers and TigerBeetle's seeded VOPR runs.

* :mod:`.parts` runs the parts as separate processes, as ``docker-compose.yml`` does;
* :mod:`.proxy` is the loopback TCP proxy between every client part and each server;
* :mod:`.cluster` starts a deployment (``separate``: Temporal dev server with a SQLite file,
  Authority, coordinator, agents; ``dev``: ``missionweave dev up`` and agents) and its Mission
  of ledger handlers (:mod:`.handlers`);
* :mod:`.surroundings` gives the Authority its database, disk and clock per layout (SQLite;
  PostgreSQL under two replicas; a small tmpfs; a stepped wall clock);
* :mod:`.nemesis` applies one seeded fault per trial and undoes it as an operator would — the
  Authority's own incidents (issue 37) in :mod:`.incidents`, the loads in :mod:`.loads`;
* :mod:`.checker` judges the run; :mod:`.suite` runs trials and prints the table.

Run it with ``make faults SEED=… TRIALS=…`` or ``python -m tests.faults --help``; a short
seeded subset runs in ``make test`` (``tests/test_faults.py``). See docs/faults.md.
"""
