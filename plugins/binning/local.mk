# plugins/binning: not built yet
