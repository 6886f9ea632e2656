# Build the images and compile the pipeline against them, with one version for all;
# keep requirements.lock, the one set of versions that CI and the images install.
SHELL     := /bin/bash
VERSION   ?= $(shell python -c "import tomllib; print(tomllib.load(open('pyproject.toml', 'rb'))['project']['version'])")
REGISTRY  ?= ghcr.io/dogs-vs-cats
IMAGE     ?= $(REGISTRY)/dogs-vs-cats:$(VERSION)
GPU_IMAGE ?= $(REGISTRY)/dogs-vs-cats-cuda:$(VERSION)
MLFLOW_IMAGE ?= $(REGISTRY)/mlflow:$(VERSION)

# the pushed image's immutable digest where docker knows it, else the tag
digest = $(shell docker inspect --format '{{index .RepoDigests 0}}' $(1) 2>/dev/null || echo $(1))

# torch as this project's machines install it (x86_64 Linux, the release pip serves here)
TORCH_PINS ?= torch==2.14.1 torchvision==0.29.1

.PHONY: lock images push compile lint-images image-test
lock:
	uv pip compile pyproject.toml --all-extras --python-version 3.11 \
	  --python-platform x86_64-manylinux_2_28 --annotation-style line --no-header \
	  --constraint <(printf '%s\n' $(TORCH_PINS)) --output-file requirements.lock

images:
	docker build -f images/Dockerfile -t $(IMAGE) .
	docker build -f images/Dockerfile --build-arg TORCH_INDEX_URL= -t $(GPU_IMAGE) .
	docker build -f images/mlflow.Dockerfile -t $(MLFLOW_IMAGE) images

push: images
	docker push $(IMAGE)
	docker push $(GPU_IMAGE)
	docker push $(MLFLOW_IMAGE)

compile:
	python -m pipeline compile --output pipeline.yaml --image $(call digest,$(IMAGE)) --gpu-image $(call digest,$(GPU_IMAGE))

lint-images:
	hadolint images/Dockerfile images/mlflow.Dockerfile

# Build images/Dockerfile with buildah (no Docker engine needed) on a debootstrapped stand-in
# for the Python base, then run every pipeline task in it as its user, on the sample
# (needs Debian's buildah and debootstrap, and network to Debian's mirror and PyPI).
image-test:
	python -m pytest -m image -p no:cacheprovider tests/test_image.py
