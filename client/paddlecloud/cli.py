"""paddlectl, the PaddleCloud command line: `paddlectl = paddlecloud.cli:main` (commands in paddlecloud.ctl)."""

from __future__ import annotations

from paddlecloud.ctl.commands import cli


def main(argv: list[str] | None = None) -> None:
    """Run paddlectl with `argv` (default: sys.argv[1:]) and exit with its code."""
    cli.main(args=argv, prog_name="paddlectl")


if __name__ == "__main__":
    main()
