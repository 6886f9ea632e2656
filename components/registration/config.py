"""The register step's schema: which run is judged, against what, under which name."""

from __future__ import annotations

from dataclasses import dataclass

from components.core.names import REGISTERED_MODEL_NAME
from components.core.schema import LOCAL, PER_RUN, setting

DEFAULT_ALIAS = "candidate"  # MLflow's rules take it (tests/registration/test_config.py)


@dataclass(frozen=True)
class RegisterConfig:
    """Which run is judged, against what, and under which registry name."""

    mlflow_run_id: str = setting(help="the training run whose model is judged", role=LOCAL)
    test_accuracy: float | None = setting(
        None,
        "checked against the test_accuracy the evaluate step logged into the run, which is "
        "what is judged; unset: not checked",
        role=LOCAL,
    )
    min_accuracy: float = setting(
        0.85,
        "lowest test accuracy that is registered, met with 95% confidence on the test photos "
        "(the lower end of the figure's Wilson interval)",
        role=PER_RUN,
    )
    registered_model_name: str = setting(
        REGISTERED_MODEL_NAME, "name in the MLflow Model Registry", role=PER_RUN
    )
    alias: str = setting(
        DEFAULT_ALIAS,
        "alias the registered version gets when it beats the version holding it on the "
        "same test split",
        role=LOCAL,
    )
    data: str | None = setting(
        None,
        "the preprocess step's output the model was tested on: where the alias's holder "
        "was tested on other photos, it is scored again on these test photos; unset: not",
        role=LOCAL,
    )
    force_alias: bool = setting(
        False,
        "move the alias to the new version when the holder's test accuracy was measured on "
        "another test split (figures that cannot be compared)",
        role=PER_RUN,
    )

    def __post_init__(self) -> None:
        name = self.registered_model_name
        if not name.isprintable() or "'" in name or not name.strip():
            raise ValueError(
                f"expected a registered_model_name of printable characters without ', "
                f"found {name[:100]!r}"
            )
        if self.alias != DEFAULT_ALIAS:  # MLflow's rules load MLflow: seconds, for a refusal
            check_alias(self.alias)
        for name in ("min_accuracy", "test_accuracy"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= 1:  # NaN fails too
                hint = f" (a share: {value / 100:g} for {value:g}%)" if 1 < value <= 100 else ""
                raise ValueError(f"expected {name} from 0 to 1, found {value:g}{hint}")


def check_alias(alias: str) -> None:
    """Refuse an alias the Model Registry would refuse, by MLflow's own rules, before any
    version is created (a refusal after it would leave an unaliased version behind).

    Raises:
        ValueError: empty, other than letters, digits, _ and -, too long, ``latest`` or a
            version's name such as ``v3``.
    """
    from mlflow.exceptions import MlflowException
    from mlflow.utils.validation import (
        _validate_model_alias_name,
        _validate_model_alias_name_reserved,
    )

    try:
        _validate_model_alias_name(alias)
        _validate_model_alias_name_reserved(alias)
    except MlflowException as err:
        raise ValueError(f"expected an alias the Model Registry takes: {err.message}") from None
