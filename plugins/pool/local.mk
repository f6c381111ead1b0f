# plugins/pool: not built yet
