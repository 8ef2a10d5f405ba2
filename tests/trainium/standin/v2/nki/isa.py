"""Stand-in nki.isa: the kernels of these tests compute with numpy."""
