"""theorylab: nn."""
