# plugins/logging: not built yet
