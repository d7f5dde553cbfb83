# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The router unit's ExecStartPost: register the fleet's members with a router that has just started.

sglang-router 0.3.2 keeps the workers added through POST /workers in memory only, so a restarted router (a crash
under Restart=on-failure, a reboot, a new release) would serve none of them. Its unit carries no worker; this
registers every worker of the membership file (plugins/module_utils/fleet/router_members.py describes it; the product
rewrites it on each join and leave) as soon as the router answers GET /liveness.

Facts (sglang-router 0.3.2, measured against the real router, tests/contract/test_router_api.py): the router answers
/liveness about 0.4 s after its start, with no worker; POST /workers {"url"} answers 202 at once and a background
workflow adds the worker when its /health answers (a worker still loading is added once it is ready, within
--worker-startup-timeout-secs); POSTing a listed worker again is accepted and changes nothing.

Standard library only: it runs on the router host outside Ansible, as the router's user.

    register_workers.py --members-file /etc/sglang-router/workers.json [--timeout 60]
"""

import argparse
import json
import sys
import time
import urllib.error
import urllib.request


def _request(method, url, body=None, timeout=5.0):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.status, resp.read().decode("utf-8", "replace")


def wait_live(router_url, timeout, interval=0.2, clock=time.monotonic, sleep=time.sleep, request=_request):
    """Seconds until GET /liveness answered 200; None when it did not within ``timeout``."""
    start = clock()
    while True:
        try:
            if request("GET", router_url + "/liveness", timeout=2.0)[0] == 200:
                return clock() - start
        except (OSError, urllib.error.URLError):
            pass
        if clock() - start >= timeout:
            return None
        sleep(interval)


def register(router_url, workers, request=_request):
    """POST each worker; the list of problems (empty when every POST was accepted)."""
    problems = []
    for url in workers:
        try:
            status, text = request("POST", router_url + "/workers", {"url": url})
        except urllib.error.HTTPError as exc:
            status, text = exc.code, exc.read().decode("utf-8", "replace")
        except (OSError, urllib.error.URLError) as exc:
            status, text = None, str(exc)
        if status not in (200, 201, 202):
            problems.append("POST %s/workers {\"url\": %s}: %s %s" % (router_url, url, status, text[:200]))
    return problems


def main(argv=None, request=_request, clock=time.monotonic, sleep=time.sleep):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members-file", required=True)
    ap.add_argument("--timeout", type=float, default=60, help="seconds to wait for GET /liveness")
    args = ap.parse_args(argv)
    try:
        with open(args.members_file, encoding="utf-8") as handle:
            members = json.load(handle)
        router_url, workers = str(members["router_url"]).rstrip("/"), [str(u) for u in members["workers"]]
    except FileNotFoundError:
        # a router's first start: the router role writes the file once the router answers
        print("no membership file %s yet: no worker to register" % args.members_file)
        return 0
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print("cannot read the router's membership file %s: %s; no worker registered" % (args.members_file, exc),
              file=sys.stderr)
        return 1
    waited = wait_live(router_url, args.timeout, clock=clock, sleep=sleep, request=request)
    if waited is None:
        print("the router at %s did not answer GET /liveness within %.0f s; no worker registered"
              % (router_url, args.timeout), file=sys.stderr)
        return 1
    problems = register(router_url, workers, request=request)
    for problem in problems:
        print(problem, file=sys.stderr)
    print("registered %d of %d member(s) from %s with the router at %s (live after %.1f s): %s"
          % (len(workers) - len(problems), len(workers), args.members_file, router_url, waited,
             ", ".join(workers) or "none"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
