
ÿÿÿÿ garbage