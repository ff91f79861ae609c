"""paddlectl: click commands over the SDK (paddlecloud.sdk), and how their answers are printed.

`paddlecloud.cli` is the entry point (its path stays, so installed scripts keep working); `app`
holds the root group and shared helpers; the `cmd_*` modules attach the commands; `commands`
assembles them; `output` renders. A command reads its flags, calls the SDK and prints: the rules
live in the SDK and the contract, not here. Each module imports the standard library, click and
its siblings at the top, so `paddlectl --help` stays fast; requests, rich and PyYAML are imported
where they are used (each says why).
"""
