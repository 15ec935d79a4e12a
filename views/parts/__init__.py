"""Parts that pages share or put together: widgets, captions, the header, side by side, the quiz, the lab's
measured parts, the lesson file."""
