"""The gantry command: `python -m gantry` and the `gantry` console script."""
import sys


def main() -> int:
    try:
        from gantry.cli import main as cli_main  # lazy: `gantry --help` stays fast

        return cli_main()
    except KeyboardInterrupt:
        print("\ngantry: interrupted. If Terraform was mid-change, run the same make target again to converge.",
              file=sys.stderr)
        return 130  # ExitStatus.INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
