"""The documentation site's generated references (docs/reference/): `python -m tools.docs [--check]`.

Each generator (gen_cli, gen_settings, gen_api) builds its page from the code as it is now and either writes
it or, with --check, fails when the committed page differs (so a changed click option, setting or API route
without a regenerated page fails `make docs-check`, part of `make test`).
"""
