"""theorylab: spectral."""
