"""privagg.engines"""
