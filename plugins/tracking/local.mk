# plugins/tracking: not built yet
