# A local stand-in for the slim Python base (python:3.11-slim-bookworm), for building the
# steps' image where no registry can be reached: Debian bookworm's minimal root file system
# (debootstrap --variant=minbase --include=python3,python3-venv), added as rootfs.tar, with
# Python in a virtual environment first on PATH, as the official image has it in /usr/local.
# Debian's 3.11.2 is older than the official base's patched CPython; the steps do not rely
# on tarfile's extraction filters. Built by tests/imagebuild.py for tests/test_image.py (make image-test).
FROM scratch
ADD rootfs.tar /
ENV PATH=/opt/python/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8
RUN python3 -m venv /opt/python
CMD ["python3"]
