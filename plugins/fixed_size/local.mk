# plugins/fixed_size: not built yet
