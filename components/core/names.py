"""Names every step agrees on, kept here so that none of them is a second literal."""

DEFAULT_EXPERIMENT = "dogs-vs-cats"  # the MLflow experiment
REGISTERED_MODEL_NAME = "dogs-vs-cats"  # the MLflow Model Registry entry
CLASSES = ("cat", "dog")  # label 0, label 1
# a train output's files (the model folder), named once
WEIGHTS_FILE = "model.pt"  # the train step's weights and the spec that rebuilds the net
SPEC_FILE = "spec.json"  # the net, its input and its views, as data
ONNX_FILE = "model.onnx"  # beside model.pt in a train output, and in the MLflow model
INT8_FILE = "model.int8.onnx"  # the same graph in int8, where training was asked for it
HISTORY_FILE = "history.json"  # each epoch's metrics
RUN_ID_FILE = "mlflow_run_id"  # the MLflow run that trained it, for evaluate and register
DOWNLOAD_RECORD = "download.json"  # the download step's record: source, bytes, sha256
TEST_PHOTOS_DIR = "test_photos"  # beside the arrays: the test split's photo files, in its order
# MLflow waits 120 s per request and retries 7 times (about 20 minutes) by default: a
# tracking server whose API hangs would stall a step that long; these bound it
MLFLOW_HTTP_LIMITS = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "30", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "5"}
MLFLOW_WAITS = (
    "waits: a tracking server that does not answer its health check within 10 s stops the "
    "step before any work; after that each MLflow call waits at most 30 s and is tried 5 "
    "times with back-off (about 4 minutes in all), then the step stops with one line "
    "(MLFLOW_HTTP_REQUEST_TIMEOUT and MLFLOW_HTTP_REQUEST_MAX_RETRIES change this)"
)
# what scores photos: ONNX Runtime (its graph exported at train time) or eager torch
RUNTIMES = ("auto", "onnx", "torch")
RUNTIME_HELP = "onnx (ONNX Runtime) or torch; auto: onnx on a CPU, torch on a GPU"
INT8_RUNTIME = "onnx-int8"  # the model's int8 graph in ONNX Runtime, where it has one
SCORING_RUNTIMES = (*RUNTIMES, INT8_RUNTIME)  # what predict, evaluate and serve take
