"""privagg.mechanisms"""
