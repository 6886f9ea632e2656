# Build the images and compile the pipeline against them, with one version for all.
VERSION   ?= $(shell python -c "import tomllib; print(tomllib.load(open('pyproject.toml', 'rb'))['project']['version'])")
REGISTRY  ?= ghcr.io/dogs-vs-cats
IMAGE     ?= $(REGISTRY)/dogs-vs-cats:$(VERSION)
GPU_IMAGE ?= $(REGISTRY)/dogs-vs-cats-cuda:$(VERSION)
MLFLOW_IMAGE ?= $(REGISTRY)/mlflow:$(VERSION)
CUDA_BASE ?= pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime

# the pushed image's immutable digest where docker knows it, else the tag
digest = $(shell docker inspect --format '{{index .RepoDigests 0}}' $(1) 2>/dev/null || echo $(1))

.PHONY: images push compile lint-images
images:
	docker build -f images/Dockerfile -t $(IMAGE) .
	docker build -f images/Dockerfile --build-arg BASE_IMAGE=$(CUDA_BASE) --build-arg TORCH_INDEX_URL= -t $(GPU_IMAGE) .
	docker build -f images/mlflow.Dockerfile -t $(MLFLOW_IMAGE) images

push: images
	docker push $(IMAGE)
	docker push $(GPU_IMAGE)
	docker push $(MLFLOW_IMAGE)

compile:
	python -m pipeline compile --output pipeline.yaml --image $(call digest,$(IMAGE)) --gpu-image $(call digest,$(GPU_IMAGE))

lint-images:
	hadolint images/Dockerfile images/mlflow.Dockerfile
