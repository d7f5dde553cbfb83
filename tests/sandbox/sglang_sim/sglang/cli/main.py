"""``sglang serve ARGS`` (0.5.23's recommended entrypoint) -> same as python -m sglang.launch_server."""
import sys


def main():
    if len(sys.argv) < 2 or sys.argv[1] != "serve":
        print("usage: sglang serve --model-path MODEL [options]", file=sys.stderr)
        return 2
    from sglang.launch_server import main as serve_main
    serve_main(sys.argv[2:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
