"""The gantry command: `python -m gantry` and the `gantry` console script."""
import sys


def main() -> int:
    try:
        from gantry.cli import main as cli_main  # lazy: `gantry --help` stays fast

        return cli_main()
    except ModuleNotFoundError as e:  # `make install` has the trainer only: say how to add the launcher's packages
        from gantry.errors import missing_cloud_extra

        error = missing_cloud_extra(e)
        if error is None:
            raise
        print(f"gantry: error: {error.line()}", file=sys.stderr)
        return int(error.status)
    except KeyboardInterrupt:
        print("\ngantry: interrupted. If Terraform was mid-change, run the same make target again to converge.",
              file=sys.stderr)
        return 130  # ExitStatus.INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
