"""What a pipeline task does around a step: its training config, its reports in the KFP
UI, its line in a local run's account."""
