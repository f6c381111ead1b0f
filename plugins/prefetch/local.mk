# plugins/prefetch: not built yet
