"""paddlectl's parts: config and token cache, the HTTP client, the file layer, jobs, output, commands.

`app` holds the root group and shared helpers; `cmd_jobs`, `cmd_files`, `cmd_account`,
`cmd_config` and `cmd_help` attach the commands; `commands` assembles them; `output` renders.
Each module imports the standard library, click and its siblings at the top, so `paddlectl --help`
stays fast; requests, rich and PyYAML are imported where they are used (each says why).
"""
