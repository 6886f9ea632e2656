"""The tags this project's MLflow runs and logged models carry, each with what it says."""

# a registered version's class names, as JSON, in label order: one list per registered name
CLASSES_TAG = "classes"

# KFP's
KFP_RUN_ID_TAG = "kfp.run_id"  # the KFP run a step's run belongs to
KFP_PIPELINE_TAG = "kfp.pipeline_name"
KFP_PIPELINE_RUN_TAG = "kfp.pipeline_run_id"  # KFP's own tag on its parent run
PARENT_TAG = "mlflow.parentRunId"  # MLflow's own: the UI nests a child under its parent

# a training run's
OUTPUT_TAG = "training.output"  # the folder a run's training writes; resume checks it
STORE_TAG = "training.checkpoint_uri"  # its durable checkpoint store, where it has one
# a resumed run trained to more epochs than its `epochs` param (params cannot change)
EPOCHS_TAG = "training.epochs"
DIVERGED_TAG = "training.diverged"  # why the run stopped at a non-finite loss
# and its params (set once, never changed) recording the test split it was trained beside:
# the sha256 of its arrays as loaded, and of which photos it holds, at any size
TEST_SPLIT_PARAM, TEST_PHOTOS_PARAM = "data_test_sha256", "data_test_photos_sha256"

# an evaluation's, on the run it evaluated: the sha256 of the report it logged as
# evaluation/PREFIX/metrics.json, so that the gate reads only the report evaluate wrote
EVALUATION_DIGEST_TAG = "evaluation.{prefix}.sha256"

# a search's (a grid, Katib's or Optuna's)
SEARCH_TAG = "search.kind"  # on a search's parent run: what ran its trials, one of
GRID_SEARCH, KATIB_SEARCH, OPTUNA_SEARCH = "grid", "katib", "optuna"  # KFP's sweep, the
# search on the cluster, the same search on this machine
COMBINATION_TAG = "search.combination"  # the recipe settings a grid's child run varies
TRIAL_TAG = "search.trial"  # the trial a run is: a Katib trial's name, an Optuna trial's
STOPPED_EARLY_TAG = "search.stopped_early"  # "true" on a trial stopped early
BEST_TAG = "search.best"  # "true" on the search's best finished trial

# a logged model's
IDENTITY_TAG = "sha256."  # sha256.FILE: the digest of each of its files

# a training run's params recording where its test split comes from: the MLflow run that
# records the download step's source listing, and the test share's fraction
SOURCE_LISTING_PARAM, TEST_FRACTION_PARAM = "data_source_listing", "data_test_fraction"
LISTING_DIGEST_PARAM = "data_source_listing_sha256"  # and that listing's sha256
# the download step's, on the run that records its source listing, and a registered
# version's, whose test split was checked against it: the listing's sha256
SOURCE_LISTING_TAG = "data.source-listing.sha256"
