"""theorylab: dynamics."""
