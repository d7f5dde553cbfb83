"""The sandbox's API keys, decrypted the way ansible-playbook decrypts them (its vault library and the vault id the
checkout's ansible.cfg names), for the harness's own callers: the rolling redeploy's load, the molecule verifiers and
the key-search tests. Never printed.

``sandbox_api_keys()`` -> tuple of dicts ``name``, ``key`` (inventory/sandbox/group_vars/all/api_keys.yml).
``auth_header()`` -> {"Authorization": "Bearer <the first key>"}, the deployment's own callers' key.
"""

import functools
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KEYS_FILE = os.path.join(ROOT, "inventory", "sandbox", "group_vars", "all", "api_keys.yml")
PASSWORD_FILE = os.path.join(ROOT, "tests", "sandbox", "vault-password")


@functools.lru_cache(maxsize=1)
def sandbox_api_keys():
    import yaml
    from ansible.parsing.vault import VaultLib, VaultSecret

    with open(PASSWORD_FILE, "rb") as fh:
        vault = VaultLib([("sandbox", VaultSecret(fh.read().strip()))])

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!vault", lambda loader, node: vault.decrypt(loader.construct_scalar(node)).decode())
    with open(KEYS_FILE) as fh:
        data = yaml.load(fh, Loader=Loader)  # noqa: S506 - SafeLoader plus the one !vault tag
    return tuple({"name": str(e["name"]), "key": str(e["key"])} for e in data["deployment_api_keys"])


def auth_header():
    return {"Authorization": "Bearer %s" % sandbox_api_keys()[0]["key"]}


if __name__ == "__main__":
    # For a user of the sandbox: `KEY=$(python tests/sandbox/sandbox_keys.py)` (docs/sandbox.md).
    print(sandbox_api_keys()[0]["key"])
