"""Offline stand-in for get-pip.py, which ansible-test downloads from a host we cannot reach.

tools/ansible_test_pip.py (`make ansible-test-pip`) copies this file to
~/.ansible/test/cache/get_pip_<version>.py, where ansible-test looks first. ansible-test runs it as:

    python get_pip_X_Y.py [pip options] pip==X.Y [--no-setuptools] [--no-wheel]

It bootstraps pip with ensurepip, then pip installs the requested pip from PyPI.
"""

import subprocess
import sys

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade", "--default-pip"])
subprocess.check_call([sys.executable, "-m", "pip", "install", "--upgrade", "--force-reinstall"] + args)
if "--no-setuptools" in sys.argv:
    subprocess.call([sys.executable, "-m", "pip", "uninstall", "--yes", "--quiet", "setuptools"])
