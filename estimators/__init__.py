"""theorylab: estimators."""
