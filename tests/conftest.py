"""The harness's own tests.  ``pytester`` runs pytest sessions in a subprocess, as a user would."""

pytest_plugins = ["pytester"]
