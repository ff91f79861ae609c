"""paddlectl's parts: config and token cache, the HTTP client, the file layer, jobs, output, commands.

Each module imports only the standard library at the top (plus click in `commands`), so
`paddlectl --help` stays fast; requests, rich and PyYAML are imported where they are used.
"""
