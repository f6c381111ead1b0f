# plugins/statistics: not built yet
