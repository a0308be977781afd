"""The synthetic room generator: fictional targets with planted issues, decoys and their rubric.

generator (generate_room) plans a room and runs the builders; issues holds the
issue and decoy kinds by family; criteria the rubric blocks they share;
documents the renderers; ordinary the filler documents; templates the prose
pools; context the room under construction.
"""
