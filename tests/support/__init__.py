"""The test suite's shared helpers (no tests here), imported as ``tests.support.<module>``.

* A Group on a real Authority: :mod:`.world` (with its contracts, :mod:`.contracts`), its
  PostgreSQL backend :mod:`.pg`, its servers :mod:`.serving`, artifact servers
  :mod:`.artifact_servers`, a proxy that drops connections :mod:`.loopback_proxy`.
* Temporal and Missions: :mod:`.temporal_env` (the session servers, an Authority stack),
  :mod:`.mission_harness`, :mod:`.mission_outcome`, :mod:`.executor_harness`,
  :mod:`.scheduler_sim`.
* Processes of the CLI: :mod:`.cli_processes`. Waiting on conditions: :mod:`.waits`. Public
  surfaces: :mod:`.surface`.
* Handler modules that agent processes import by dotted name (``missionweave worker --handlers
  tests.support.worker_handlers``): ``*_handlers``.

Fixtures live in ``conftest.py`` files: ``tests/conftest.py`` for the whole suite, a folder's
own for fixtures only its tests use.
"""
