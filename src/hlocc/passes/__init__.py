"""HLO → HLO passes (one per module); `pipeline.py` lists their order."""
