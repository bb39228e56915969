"""Media files the studio and training write and read (MP4 via PyAV); below both, so training needs no studio."""
