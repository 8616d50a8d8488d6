"""privagg.cli"""
