"""Games behind one batched protocol (see base.py). ``make_game(name)`` picks one."""

from .base import Game, StepResult
from .connect4 import ConnectFour
from .tictactoe import TicTacToe

GAMES: dict[str, type[Game]] = {"connect4": ConnectFour, "tictactoe": TicTacToe}


def make_game(name: str) -> Game:
    try:
        return GAMES[name]()
    except KeyError:
        raise ValueError(f"unknown game {name!r}: choose one of {', '.join(sorted(GAMES))} (game.name)") from None


__all__ = ["GAMES", "ConnectFour", "Game", "StepResult", "TicTacToe", "make_game"]
