"""The sandbox's API keys, decrypted the way ansible-playbook decrypts them (its vault library and the vault id the
checkout's ansible.cfg names), for the harness's own callers: the rolling redeploy's load, the molecule verifiers and
the key-search tests. Never printed.

``sandbox_api_keys()`` -> tuple of dicts ``name``, ``key`` (inventory/sandbox/group_vars/all/api_keys.yml).
``auth_header(key=None)`` -> {"Authorization": "Bearer <key>"}; by default the first key, the deployment's own
callers' key.
``write_vault_vars(path, data)``: ``data`` as a YAML vars file encrypted whole under the vault id "sandbox", as a user
keeps a rotated key (``ansible-playbook -e @path`` decrypts it with the password file scripts/env.sh names).
"""

import functools
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KEYS_FILE = os.path.join(ROOT, "inventory", "sandbox", "group_vars", "all", "api_keys.yml")
PASSWORD_FILE = os.path.join(ROOT, "tests", "sandbox", "vault-password")


def _vault():
    from ansible.parsing.vault import VaultLib, VaultSecret

    with open(PASSWORD_FILE, "rb") as fh:
        secret = VaultSecret(fh.read().strip())
    return VaultLib([("sandbox", secret)]), secret


@functools.lru_cache(maxsize=1)
def sandbox_api_keys():
    import yaml

    vault = _vault()[0]

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!vault", lambda loader, node: vault.decrypt(loader.construct_scalar(node)).decode())
    with open(KEYS_FILE) as fh:
        data = yaml.load(fh, Loader=Loader)  # noqa: S506 - SafeLoader plus the one !vault tag
    return tuple({"name": str(e["name"]), "key": str(e["key"])} for e in data["deployment_api_keys"])


def auth_header(key=None):
    return {"Authorization": "Bearer %s" % (key or sandbox_api_keys()[0]["key"])}


def write_vault_vars(path, data):
    import yaml

    vault, secret = _vault()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(vault.encrypt(yaml.safe_dump(data), secret, vault_id="sandbox"))


if __name__ == "__main__":
    # For a user of the sandbox: `KEY=$(python tests/sandbox/sandbox_keys.py)` (docs/sandbox.md).
    print(sandbox_api_keys()[0]["key"])
