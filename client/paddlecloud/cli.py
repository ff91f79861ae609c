"""paddlectl command line (placeholder until the CLI issue lands)."""


def main() -> None:
    raise SystemExit("paddlectl: not implemented yet")
